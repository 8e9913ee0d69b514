from django.apps import AppConfig


class BoothsConfig(AppConfig):
    name = "booths"
    verbose_name = "Booths"

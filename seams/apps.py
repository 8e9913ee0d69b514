from django.apps import AppConfig


class SeamsConfig(AppConfig):
    name = "seams"
    verbose_name = "Host seams"

from django.apps import AppConfig


class SmsConfig(AppConfig):
    name = "sms"
    verbose_name = "SMS"

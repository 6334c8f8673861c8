"""An order: the business row a view saves beside the execution that ships it."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    shipped = models.BooleanField(default=False)

    class Meta:
        app_label = "shop"

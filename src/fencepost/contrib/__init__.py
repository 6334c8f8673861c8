"""Framework integrations, each optional: a framework is imported only by its own module.

* :mod:`fencepost.contrib.django` — a Django app: the store from ``settings``, submits
  inside Django's transactions, ``manage.py fencepost_worker`` and ``fencepost_migrate``.
"""

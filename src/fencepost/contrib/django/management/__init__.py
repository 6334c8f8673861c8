"""The ``manage.py`` commands of :mod:`fencepost.contrib.django`."""

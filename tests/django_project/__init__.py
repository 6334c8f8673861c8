"""A minimal Django project for fencepost.contrib.django's tests (run as a real process).

Its database is chosen by the environment (:mod:`tests.django_project.settings`), so
the same project runs on a SQLite file and on a PostgreSQL schema.
"""

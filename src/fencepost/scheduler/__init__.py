"""Turning schedules into executions: the materializer (and its misfire and overlap follow-ups).

The decisions are pure (:mod:`fencepost.timing.planning`); this package reads
what they need from the store and writes what they decide.
"""

"""Pure time maths on the domain's values: the Clock, cron and interval rules, time
zones and DST, misfire and overlap planning, and the checks of a schedule's definition.

No I/O beyond reading the zone database. Imports only :mod:`fencepost.domain`.
"""

"""Pure domain: models, states, the state machine, policies, checks, retry policy and errors.

No I/O, and no import of any other part of fencepost: every other layer builds on this one.
"""

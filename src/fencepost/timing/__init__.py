"""Pure time handling: the Clock, and checks for instants and durations."""

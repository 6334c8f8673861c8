"""Pure domain: models, states, the state machine, retry policy and errors. No I/O."""

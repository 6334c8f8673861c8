"""The store's verbs as pure code, one module per section of the contract.

What a verb decides without a connection lives here (see
docs/explanation/store-layout.md): its validation, and in time its plan. A store
binds them to its connections; nothing here holds one.
"""

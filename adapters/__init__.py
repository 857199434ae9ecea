"""Everything that touches the outside world, in rooms by role. Each room's ``__init__`` says what lives
there and what it may import; docs/architecture.md draws the layers, and tests/unit/test_architecture.py
holds every import to them. ``progress`` (progress bars on a terminal) is a leaf any room may use."""

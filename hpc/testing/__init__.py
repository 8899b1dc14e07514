"""Tools for testing code written for the library's backends (see :mod:`.device`)."""

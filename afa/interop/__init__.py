"""Adapters to other differential-privacy libraries, each a submodule imported only when asked for."""

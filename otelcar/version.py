"""otelcar's version, in a module of its own so that every layer can name it (in a report's
generator line, a saved timeline, the plugin list) without importing the package's public
API, which sits above them all."""

__version__ = "0.1.0"

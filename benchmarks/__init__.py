"""The project's measurements (docs/measurements.md), a package so that tests import them as they import the project."""

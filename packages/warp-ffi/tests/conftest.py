"""Warp logs a banner and a line per module it builds; the tests keep it to warnings."""

import warp as wp

wp.config.log_level = wp.LOG_WARNING

"""Warp prints a banner and a line per module it builds; the tests keep quiet."""

import warp as wp

wp.config.quiet = True

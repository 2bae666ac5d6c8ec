"""Plain-Python twins of rbcd.related: Fourier features, sparse random features, DSEKL."""

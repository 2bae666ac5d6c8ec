"""Plain-Python twins of rbcd.solvers: coordinate descent (``cd``) and ridge by CG (``cg``)."""

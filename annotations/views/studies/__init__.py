"""Researcher pages for studies, one module per area: create, the study page and its settings
(``detail``), People (``people``), items, imports and exports; ``shared`` holds what they share.

Views are thin: forms check shape, services do the work, ``access`` decides who may do it.
"""

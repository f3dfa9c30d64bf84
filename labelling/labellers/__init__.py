"""Machine labellers: annotators that answer a study's questions like a human does (issue 5).

No Django here. A labeller gets plain question dicts (the protocol schema, already resolved for
the item) and :class:`~labelling.labellers.base.LabelItem` objects, and returns one
:class:`~labelling.labellers.base.LabelOutcome` per (item, supported question). The Django layer
turns outcomes into annotations (value set) or failed attempts (error set). See docs/labellers.md.
"""

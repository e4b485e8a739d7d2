"""Tracking plans (issue #56): the events a team agreed on, read from the shapes teams hold
(Segment's Public API rules, its older Config API, a folder of JSON Schemas) into one typed,
frozen model. Pure rules like ``spec``: no I/O beyond reading the plan's files."""

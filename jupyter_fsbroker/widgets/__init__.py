"""Views of the broker: consent prompts, the dashboard, transfer progress (widgets), and text.

Views observe the broker and never decide policy. Modules here import
``ipywidgets`` only where they build widgets; :mod:`.text` needs nothing.
"""

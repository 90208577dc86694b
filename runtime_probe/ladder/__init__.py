"""The escalation ladder: numbered steps (``steps``) that rerun a failing load or run in fresh
children with more instruments, the readers of what those instruments print (``readers``), and
the findings they turn into (``findings``).
"""

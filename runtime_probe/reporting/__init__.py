"""The report model: findings and their codes, errors, the report and its renderers (text, JSON, Markdown), progress, the escaping and path rules."""

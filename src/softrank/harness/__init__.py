"""The harness: panels of operators, the audit run, the report and the CLI."""

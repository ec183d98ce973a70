"""What people read: text formatters, terminal tables, comparison tables and the HTML report."""

"""Model builders that rebuild each paper's model from the package's layers."""

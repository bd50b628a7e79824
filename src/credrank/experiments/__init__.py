"""Research runs behind ``credrank bench``: the TREC correctness signals (stance model,
credibility model, agreement), oracle feedback, CoAID-fitted priors, Golden-Gaze hosts and the
RA-RAG simulation. Product code never imports this package (an import-linter contract checks
it); what proves itself here moves into the product as its own issue."""

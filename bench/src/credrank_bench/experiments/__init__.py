"""Research runs behind ``credrank bench``: the dataset benches, the TREC correctness signals
(stance model, credibility model, agreement), oracle feedback, CoAID-fitted priors, Golden-Gaze
hosts, the RA-RAG simulation and the audit's stress-test runner. The product (``credrank``)
never imports this distribution (an import-linter contract checks it); what proves itself here
moves into the product as its own issue."""

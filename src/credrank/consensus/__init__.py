"""Label-free answer consensus over the candidates of one query (chapter 35.3): answers read
from each passage, copies counted once, weighted votes, an agreement factor per passage and a
calibrated ``contested`` status where the consensus is weak."""

"""What a reader sees: the headline sentences, the HTML tables, the landing page and the figures.
Imports hwsweep.analysis and hwsweep.contracts only."""

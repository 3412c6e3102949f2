"""`make bench` (`python -m lit_modules.bench`): speed ratios of our training path and the techniques."""

"""The report's sections, one module each (``reports.gather`` puts them in order): design, people,
agreement, machines (machine vs human), findings, prose (methods, results, limitations), appendix
(reproducibility) and compare (several studies side by side). Each reads through the selectors the pages
and the API use and returns a typed ``reports.document.Section``."""

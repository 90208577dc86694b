"""The build pipeline: ``pipeline.STEPS`` (resolve -> export -> compile -> debug_twin -> validate ->
package) over a ``BuildState``; ``options`` is the leaf all steps import. One module per step's work.
"""

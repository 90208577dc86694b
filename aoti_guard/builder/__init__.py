"""The build pipeline: ``pipeline.STEPS`` (resolve -> export -> compile -> validate -> debug_twin ->
package) over a ``BuildState``; ``options`` is the leaf all steps import. One module per step's work.
"""

"""HorizonServe's evaluation in simulation: the single-GPU experiment (:mod:`.experiment`), the
paper testbed's runtimes (:mod:`.testbed`, fitted by :mod:`.testbed_fit`), Table 3
(:mod:`.table3`) and the figures (:mod:`.figures`)."""

"""Graph breaks: `Unsupported` (why a trace stops), the plan for resuming after the
instruction it stopped at, and the resume functions that run the rest of the frame."""

"""What runs when a compiled function is called: the per-code cache of entries and the
compile pipeline (`entry`), backends, specialization of symbolic graphs to concrete
sizes, automatic dynamic sizes, errors mapped to the user's lines, and reports."""

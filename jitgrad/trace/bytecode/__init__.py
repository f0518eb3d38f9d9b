"""CPython 3.11 bytecode: the opcode facts (`opcodes`, the one module that knows them),
decoded instructions and their assembler, and the control-flow analysis breaks need."""

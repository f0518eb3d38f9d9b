"""`Module`: the base class of layers and models, following torch.nn.Module.

A Module owns three ordered tables filled by attribute assignment: `_parameters`
(Parameters), `_buffers` (tensors registered with `register_buffer`) and `_modules`
(child Modules). Traversals (`named_parameters`, `named_modules`, `state_dict`, ...)
visit a module's own entries first, then its children in registration order, and yield
a shared parameter or module once (research/eager_autograd.md §3.1); `state_dict` is the
exception: it lists a shared submodule under every name, as PyTorch does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from jitgrad.eager import dtypes
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.node import RemovableHandle, add_hook, tensor_type_name
from jitgrad.eager.tensor import Tensor, reset_grads
from jitgrad.nn.modules.backward_hook import BackwardHook
from jitgrad.nn.modules.module_state import IncompatibleKeys, collect_state, load_state
from jitgrad.nn.parameter import Parameter


def typename(obj: Any) -> str:
    """The name PyTorch's messages use for `obj`: `jitgrad.FloatTensor`, `int`, `mod.Cls`."""
    if isinstance(obj, Tensor):
        return tensor_type_name(obj)
    cls = type(obj)
    module = cls.__module__ or ""
    return cls.__qualname__ if module in ("", "builtins") else f"{module}.{cls.__qualname__}"


def _check_member_name(kind: str, name: Any, owner: Module, table: dict[str, Any]) -> None:
    """Validate a parameter/buffer/module name as PyTorch does (TypeError / KeyError)."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {typename(name)}")
    if "." in name:
        raise KeyError(f"{kind} name can't contain \".\", got: {name}")
    if name == "":
        raise KeyError(f"{kind} name can't be empty string \"\"")
    if hasattr(owner, name) and name not in table:
        raise KeyError(f"attribute '{name}' already exists")


def _addindent(text: str, spaces: int) -> str:
    """Indent every line of `text` but the first by `spaces` (torch's `_addindent`)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _add_hook(table: dict[int, Callable], hook: Callable, prepend: bool) -> RemovableHandle:
    handle = add_hook(table, hook)
    if prepend:
        entries = list(table.items())
        table.clear()
        table.update([entries[-1]] + entries[:-1])
    return handle


class Module:
    """Base class for layers and models: subclass it, assign layers in `__init__`, define `forward`.

    Calling the module runs forward pre-hooks, `forward`, then forward hooks.
    """

    training: bool

    def __init__(self) -> None:
        set_attr = object.__setattr__
        set_attr(self, "training", True)
        set_attr(self, "_parameters", {})
        set_attr(self, "_buffers", {})
        set_attr(self, "_non_persistent_buffers_set", set())
        set_attr(self, "_modules", {})
        set_attr(self, "_forward_pre_hooks", {})
        set_attr(self, "_forward_pre_hooks_with_kwargs", set())
        set_attr(self, "_forward_hooks", {})
        set_attr(self, "_forward_hooks_with_kwargs", set())
        set_attr(self, "_backward_hooks", {})

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ----- calling ------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks):
            return self.forward(*args, **kwargs)
        for key, hook in list(self._forward_pre_hooks.items()):
            if key in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        backward_hook = None
        if self._backward_hooks and STATE.enabled:
            backward_hook = BackwardHook(self, list(self._backward_hooks.values()))
            args = backward_hook.setup_input(args)
        output = self.forward(*args, **kwargs)
        for key, hook in list(self._forward_hooks.items()):
            if key in self._forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        return output if backward_hook is None else backward_hook.setup_output(output)

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Run `hook(module, args)` before forward; a non-None return replaces args.

        With `with_kwargs=True` the hook is `hook(module, args, kwargs)` and returns None
        or `(args, kwargs)`. `prepend=True` runs it before the hooks already registered.
        """
        handle = _add_hook(self._forward_pre_hooks, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """Run `hook(module, args, output)` after forward; a non-None return replaces output.

        With `with_kwargs=True` the hook is `hook(module, args, kwargs, output)`.
        """
        handle = _add_hook(self._forward_hooks, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        return handle

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Run `hook(module, grad_input, grad_output)` when backward passes a call's inputs.

        grad_input / grad_output: tuples of gradients of the call's positional arguments
        (None where an argument is not a tensor requiring grad) and of its outputs. A
        non-None return replaces grad_input. See jitgrad.nn.modules.backward_hook.
        """
        return _add_hook(self._backward_hooks, hook, prepend)

    # ----- registration ---------------------------------------------------------------
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder) under `name`.

        Raises AttributeError before `Module.__init__()`, TypeError for a value that is
        not a Parameter, KeyError for a bad or taken name, ValueError for a non-leaf.
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_member_name("parameter", name, self, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{typename(param)}' object to parameter '{name}' "
                            "(jitgrad.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                f"created explicitly. To express '{name}' as a function of another Tensor, "
                "compute the value in the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (e.g. a mask or running mean).

        Non-persistent buffers are left out of `state_dict`.
        Raises AttributeError before `Module.__init__()`, TypeError for a non-tensor,
        KeyError for a bad or taken name.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_member_name("buffer", name, self, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{typename(tensor)}' object to buffer '{name}' "
                            "(jitgrad Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under `name` (what attribute assignment does).

        Raises TypeError for a value that is not a Module, KeyError for a bad or taken name.
        """
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{typename(module)} is not a Module subclass")
        _check_member_name("module", name, self, self._modules)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_member(name, self.__dict__, self._buffers, self._modules)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as parameter '{name}' "
                                "(jitgrad.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            self._set_module_or_buffer(name, value)

    def _set_module_or_buffer(self, name: str, value: Any) -> None:
        modules = self.__dict__.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_member(name, self.__dict__, self._parameters, self._buffers)
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as child module '{name}' "
                                "(jitgrad.nn.Module or None expected)")
            modules[name] = value
        else:
            buffers = self.__dict__.get("_buffers")
            if buffers is not None and name in buffers:
                if value is not None and not isinstance(value, Tensor):
                    raise TypeError(f"cannot assign '{typename(value)}' as buffer '{name}' "
                                    "(jitgrad.Tensor or None expected)")
                buffers[name] = value
            else:
                object.__setattr__(self, name, value)

    def _remove_member(self, name: str, *tables: dict[str, Any]) -> None:
        for table in tables:
            table.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: look in the three tables
        state = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in state and name in state[table]:
                return state[table][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        keys = (dir(type(self)) + list(self.__dict__) + list(self._parameters)
                + list(self._modules) + list(self._buffers))
        return sorted(key for key in keys if not key[0].isdigit())

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path `target` (`""` is self). Raises AttributeError."""
        module = self
        for part in target.split(".") if target else ():
            if part not in module._modules:
                raise AttributeError(f"{module._get_name()} has no attribute `{part}`")
            module = module._modules[part]
        return module

    # ----- traversal ------------------------------------------------------------------
    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for self and every descendant, depth first, each once."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                child_prefix = f"{prefix}.{name}" if prefix else name
                yield from module.named_modules(memo, child_prefix, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, table: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter): own parameters first, then children's; shared ones once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)  # type: ignore[misc]

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call `fn` on every child (recursively), then on self; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ----- state (see module_state.py) ------------------------------------------------------
    def state_dict(self, *, destination: dict[str, Any] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict[str, Tensor]:
        """Parameters and persistent buffers by dotted name, in registration order.

        Values are detached tensors sharing storage with the module's (unless
        `keep_vars`); a submodule registered under two names appears under both.
        """
        if destination is None:
            destination = OrderedDict()
        collect_state(self, destination, prefix, keep_vars)
        return destination  # type: ignore[return-value]

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> IncompatibleKeys:
        """Copy `state_dict`'s tensors into this module's parameters and buffers, in place.

        Parameter objects keep their identity (and requires_grad). Returns the missing and
        unexpected keys. Raises RuntimeError listing every problem ("Missing key(s)",
        "Unexpected key(s)" when `strict`, "size mismatch" always), TypeError for a
        non-mapping.
        """
        return load_state(self, state_dict, strict)

    # ----- modes, gradients, dtype --------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode on self and every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        """`train(False)`: Dropout becomes the identity; returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set requires_grad on every parameter (False freezes the module); returns self."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's `.grad`: to None (default) or to zeros in place."""
        reset_grads(self.parameters(), set_to_none)

    def _apply_to_tensors(self, convert: Callable[[np.ndarray], np.ndarray]) -> Module:
        """Convert every float parameter, gradient and buffer array; parameters keep identity."""
        for module in self.modules():
            for param in module._parameters.values():
                if param is None or param._data.dtype.kind != "f":
                    continue
                param._data = convert(param._data)
                if param._grad is not None:
                    param._grad._data = convert(param._grad._data)
            for name, buffer in module._buffers.items():
                if buffer is not None and buffer._data.dtype.kind == "f":
                    module._buffers[name] = Tensor._make(convert(buffer._data),
                                                         buffer._requires_grad)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """`to(dtype)`, `to(device)`, `to(device, dtype)`, `to(tensor)`: casts float tensors.

        jitgrad runs on the CPU only, so devices are accepted and ignored.
        Raises TypeError for a non-floating dtype.
        """
        dtype = kwargs.get("dtype")
        for arg in args:
            if isinstance(arg, Tensor):
                dtype = arg.dtype
            elif isinstance(arg, dtypes.dtype):
                dtype = arg
        if dtype is None:
            return self
        if not dtype.is_floating_point:
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")
        np_dtype = dtypes.numpy_dtype(dtype, "to")
        return self._apply_to_tensors(lambda a: a.astype(np_dtype, copy=False))

    def float(self) -> Module:
        """Cast float parameters and buffers to float32; returns self."""
        return self.to(dtypes.float32)

    def double(self) -> Module:
        """Cast float parameters and buffers to float64; returns self."""
        return self.to(dtypes.float64)

    def cpu(self) -> Module:
        return self

    # ----- printing -----------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside `Name(...)` for a leaf module; layers override it."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2)
                       for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"

"""No file-level import cycles inside the platform's packages and programs.

Every import counts, the ones inside functions too: a module that imports another where it is
used still depends on it, and a cycle hidden that way is a cycle still. Imports under
`typing.TYPE_CHECKING` are left out: they never run, they only name types for annotations.
"""

import grimp

PACKAGES = ("portal", "billing", "scheduling", "gpuctl", "nodeagent")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    imports = {m: sorted(graph.find_modules_directly_imported_by(m) & graph.modules) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(imports):
        if root in index:
            continue
        walk = [(root, iter(imports[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while walk:
            module, pending = walk[-1]
            child = next(pending, None)
            if child is None:
                walk.pop()
                if walk:
                    low[walk[-1][0]] = min(low[walk[-1][0]], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                walk.append((child, iter(imports[child])))
            elif child in on_stack:
                low[module] = min(low[module], index[child])
    return sorted(cycles)


def test_the_finder_sees_a_cycle_through_a_function_level_import():
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")   # e.g. inside a function
    graph.add_import(importer="pkg.d", imported="pkg.a")
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_no_module_imports_itself_through_others():
    cycles = import_cycles(grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=True))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)

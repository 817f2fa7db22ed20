"""Shell completion scripts for bash and zsh, written from the argparse parser itself, so a new
command or flag completes without editing this file.

An argument may carry `complete`: "files", or a list of words to offer (when it takes any text but
has usual values, e.g. job states); otherwise its `choices` are offered."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

FILES = "files"


@dataclass
class Option:
    names: list[str]
    takes_value: bool
    values: list[str] | str | None  # words, FILES, or None (any text)
    help: str


@dataclass
class Positional:
    values: list[str] | str | None
    variadic: bool


@dataclass
class Command:
    path: str  # "" for gpuctl itself, "/config/view" for `gpuctl config view`
    options: list[Option] = field(default_factory=list)
    positionals: list[Positional] = field(default_factory=list)
    commands: dict[str, tuple[str, Command]] = field(default_factory=dict)  # name -> (help, command)


def _values(action: argparse.Action) -> list[str] | str | None:
    wanted = getattr(action, "complete", None)
    if wanted is not None:
        return wanted
    return [str(choice) for choice in action.choices] if action.choices else None


def walk(parser: argparse.ArgumentParser, path: str = "") -> Command:
    command = Command(path)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if name in helps:  # aliases complete too, but only the name is described
                    command.commands[name] = (helps[name], walk(sub, f"{path}/{name}"))
        elif action.option_strings:
            command.options.append(Option(list(action.option_strings), action.nargs != 0, _values(action),
                                          " ".join((action.help or "").split())))
        else:
            command.positionals.append(Positional(_values(action), action.nargs in ("*", "+", argparse.REMAINDER)))
    return command


def every_command(root: Command) -> list[Command]:
    found = [root]
    for _, sub in root.commands.values():
        found.extend(every_command(sub))
    return found


def _sh_words(words: list[str]) -> str:
    return " ".join(words)


def _patterns(entries: list[tuple[str, str, str]], paths: list[str]) -> dict[str, list[str]]:
    """action -> the `"PATH|WORD"` case patterns that lead to it, from (path, word, action); a word
    with the same action in every command (--url, --token ...) is one `*"|WORD"` pattern."""
    paths_of: dict[tuple[str, str], set[str]] = {}
    for path, word, action in entries:
        paths_of.setdefault((word, action), set()).add(path)
    by_action: dict[str, list[str]] = {}
    for (word, action), where in paths_of.items():
        patterns = [f'*"|{word}"'] if where == set(paths) else [f'"{path}|{word}"' for path in sorted(where)]
        by_action.setdefault(action, []).extend(patterns)
    return by_action


def _grouped_cases(entries: list[tuple[str, str, str]], paths: list[str], end: str) -> list[str]:
    return [f"        {'|'.join(patterns)}) {action}{end}" for action, patterns in _patterns(entries, paths).items()]


def _scan_loop(commands: list[Command], path_var: str, word: str) -> str:
    """The shell loop (the same in bash and zsh) that finds which command the words name so far,
    skipping options and the values they take, and counts the positional words after it."""
    entries = [(c.path, name, "skip") for c in commands for o in c.options if o.takes_value for name in o.names]
    value_options = [pattern for patterns in _patterns(entries, [c.path for c in commands]).values()
                     for pattern in patterns]
    transitions = "|".join(f'"{sub.path}"' for c in commands for _, sub in c.commands.values())
    return f"""        if (( skip )); then skip=0; continue; fi
        case "${path_var}|{word}" in
            {"|".join(value_options) or '"-"'}) skip=1; continue ;;
        esac
        case "{word}" in
            -*) continue ;;
        esac
        if (( npos == 0 )); then
            case "${path_var}/{word}" in
                {transitions or '"-"'}) {path_var}="${path_var}/{word}"; continue ;;
            esac
        fi
        npos=$(( npos + 1 ))"""


def bash_script(parser: argparse.ArgumentParser) -> str:
    root = walk(parser)
    commands = every_command(root)
    value_cases, option_cases, positional_cases = [], [], []
    for command in commands:
        for option in command.options:
            if not option.takes_value:
                continue
            if option.values == FILES:
                action = 'COMPREPLY=( $(compgen -f -- "$cur") )'
            elif option.values:
                action = f'COMPREPLY=( $(compgen -W "{_sh_words(option.values)}" -- "$cur") )'
            else:
                action = "COMPREPLY=()"
            value_cases.extend((command.path, name, action) for name in option.names)
        flags = [name for option in command.options for name in option.names]
        option_cases.append(f'            "{command.path}") COMPREPLY=( $(compgen -W "{_sh_words(flags)}" -- "$cur") ) ;;')
        if command.commands:
            words = _sh_words(list(command.commands))
            positional_cases.append(f'        "{command.path}|0") COMPREPLY=( $(compgen -W "{words}" -- "$cur") ) ;;')
        for index, positional in enumerate(command.positionals):
            if positional.values == FILES:
                action = 'COMPREPLY=( $(compgen -f -- "$cur") )'
            elif positional.values:
                action = f'COMPREPLY=( $(compgen -W "{_sh_words(positional.values)}" -- "$cur") )'
            else:
                continue
            pattern = f'"{command.path}|"*' if positional.variadic else f'"{command.path}|{index}"'
            positional_cases.append(f"        {pattern}) {action} ;;")
    return f"""# bash completion for gpuctl
# load it now:        source <(gpuctl completion bash)
# or for every shell: gpuctl completion bash > ~/.local/share/bash-completion/completions/gpuctl
_gpuctl() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" cmdpath="" w
    local -i i skip=0 npos=0
    (( COMP_CWORD > 0 )) && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    COMPREPLY=()
    for (( i = 1; i < COMP_CWORD; i++ )); do
        w="${{COMP_WORDS[i]}}"
{_scan_loop(commands, "cmdpath", "$w")}
    done
    case "$cmdpath|$prev" in
{chr(10).join(_grouped_cases(value_cases, [c.path for c in commands], "; return ;;"))}
    esac
    if [[ "$cur" == -* ]]; then
        case "$cmdpath" in
{chr(10).join(option_cases)}
        esac
        return
    fi
    case "$cmdpath|$npos" in
{chr(10).join(positional_cases)}
    esac
}}
complete -o filenames -F _gpuctl gpuctl
"""


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh_described(pairs: list[tuple[str, str]]) -> str:
    return " ".join(_zsh_quote(f"{name.replace(':', chr(92) + ':')}:{help_text}") for name, help_text in pairs)


def zsh_script(parser: argparse.ArgumentParser) -> str:
    root = walk(parser)
    commands = every_command(root)
    value_cases, option_cases, positional_cases = [], [], []
    for command in commands:
        for option in command.options:
            if not option.takes_value:
                continue
            if option.values == FILES:
                action = "_files"
            elif option.values:
                action = f"compadd -- {' '.join(_zsh_quote(v) for v in option.values)}"
            else:
                action = f"_message {_zsh_quote(option.names[-1].lstrip('-'))}"
            value_cases.extend((command.path, name, action) for name in option.names)
        described = [(name, option.help) for option in command.options for name in option.names]
        option_cases.append(f'            "{command.path}") local -a opts=({_zsh_described(described)}); '
                            f"_describe -t options option opts ;;")
        if command.commands:
            subs = [(name, help_text) for name, (help_text, _) in command.commands.items()]
            positional_cases.append(f'        "{command.path}|0") local -a cmds=({_zsh_described(subs)}); '
                                    f"_describe -t commands command cmds ;;")
        for index, positional in enumerate(command.positionals):
            if positional.values == FILES:
                action = "_files"
            elif positional.values:
                action = f"compadd -- {' '.join(_zsh_quote(v) for v in positional.values)}"
            else:
                continue
            pattern = f'"{command.path}|"*' if positional.variadic else f'"{command.path}|{index}"'
            positional_cases.append(f"        {pattern}) {action} ;;")
    return f"""#compdef gpuctl
# zsh completion for gpuctl
# load it now:        source <(gpuctl completion zsh)
# or for every shell: gpuctl completion zsh > "${{fpath[1]}}/_gpuctl"
_gpuctl() {{
    local cur="${{words[CURRENT]}}" prev="${{words[CURRENT-1]}}" cmdpath="" w
    local -i i skip=0 npos=0
    for (( i = 2; i < CURRENT; i++ )); do
        w="${{words[i]}}"
{_scan_loop(commands, "cmdpath", "$w")}
    done
    case "$cmdpath|$prev" in
{chr(10).join(_grouped_cases(value_cases, [c.path for c in commands], "; return ;;"))}
    esac
    if [[ "$cur" == -* ]]; then
        case "$cmdpath" in
{chr(10).join(option_cases)}
        esac
        return
    fi
    case "$cmdpath|$npos" in
{chr(10).join(positional_cases)}
    esac
}}
if [[ "${{funcstack[1]}}" == _gpuctl ]]; then
    _gpuctl "$@"
else
    compdef _gpuctl gpuctl
fi
"""


SCRIPTS = {"bash": bash_script, "zsh": zsh_script}

# Default zsh settings of the workspace; this file is yours to change.
HISTFILE=~/.zsh_history
HISTSIZE=10000
SAVEHIST=10000
setopt share_history hist_ignore_dups
bindkey -e
autoload -Uz compinit && compinit
PROMPT='%n@%m %~ %# '

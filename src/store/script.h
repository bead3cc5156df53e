/* script.h -- a script as Redis runs it: lua/lib.lua's definitions that the
 * script uses, then the script.
 *
 * Redis runs a script's whole text at every call, and with it every
 * definition before it: lib.lua's two dozen functions were made anew at each
 * call of each script, about 2 us of Redis's time a call, most of a short
 * script's (get.lua, cancel.lua). script_link keeps only what the script
 * names, and what those definitions name in turn.
 *
 * lib.lua is read as a list of definitions, each a line at column 0 that
 * begins "local " (`local function name(`, or `local a, b = ...`) with the
 * lines up to the next one, and the comment lines right above it. A name
 * counts as used wherever it appears as a word, comments and strings
 * included: a name read too many times only keeps a definition that was not
 * needed; one read too few could not happen. The order of lib.lua is kept, so
 * a definition still comes before those that use it. A lib that leaves this
 * form is refused, not guessed at: a line at column 0 that is none of a
 * definition, an "end", a "}", a comment or a blank line; a definition of
 * another form or of more than 8 names; a name defined twice; a long
 * bracket ([[ or [=), which could hold a line of column 0 that is not code. */
#ifndef TICKD_SCRIPT_H
#define TICKD_SCRIPT_H

#include <stddef.h>

/* The text of dir/name.lua (malloc'd), or NULL with the reason in err. */
char *script_read(const char *dir, const char *name, char *err, size_t errlen);

/* The text to load for body: the definitions of lib it uses, a newline, body
 * (malloc'd); or NULL with the reason in err when lib is not of the form
 * above. */
char *script_link(const char *lib, const char *body, char *err, size_t errlen);

#endif

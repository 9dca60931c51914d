/* Plays the target program: exports a variable the kitchen ifunc uses. */
long some_target_var = 4242;

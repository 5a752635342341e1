-- A window's statements join the window's rows, which the planner cannot count through the views'
-- bounds (it guesses a few dozen): a nested loop over thousands of them took 1.9 s of a window's
-- 2 s (an anti join over 8,000 ids); hashed or merged, the same statement takes 30 ms.
set local enable_nestloop = off

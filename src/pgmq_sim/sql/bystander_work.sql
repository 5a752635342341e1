-- One bystander transaction: read ten rows, update one. {id} is an integer the tool fills in.
begin;
select sum(counter) from pgmq_sim_bystander where id between {id} and {id} + 9;
update pgmq_sim_bystander set counter = counter + 1 where id = {id};
commit

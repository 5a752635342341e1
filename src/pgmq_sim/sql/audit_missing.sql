-- $1: highest msg_id produced, $2: how many to list, $3: the ids judged already (0: none)
select g.id from generate_series($3::bigint + 1, $1) g(id)
where not exists (select 1 from msg_journal j where j.msg_id = g.id)
  and not exists (select 1 from msg_queue q where q.msg_id = g.id and q.status = 'N')
order by g.id limit $2

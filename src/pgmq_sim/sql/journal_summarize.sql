-- The journal's new block ranges summarized, so the next window's read skips them.
select brin_summarize_new_values('msg_journal_msg_id'::regclass)

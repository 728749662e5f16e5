(function(){
var box=document.getElementById('run');
if(box&&box.getAttribute('data-status')==='running'){
  var url='/api/runs/'+encodeURIComponent(box.getAttribute('data-run-id'));
  var set=function(id,text){var e=document.getElementById(id);if(e){e.textContent=text;}};
  var poll=function(){
    fetch(url,{headers:{'Accept':'application/json'}}).then(function(r){return r.json();}).then(function(run){
      set('run-status',run.status);
      set('run-done',String(run.progress.done));
      set('run-calls',String(run.cost.llm_calls));
      set('run-tokens',String(run.cost.tokens));
      if(run.status==='running'){setTimeout(poll,400);}else{location.reload();}
    }).catch(function(){setTimeout(poll,1000);});
  };
  setTimeout(poll,200);
}
document.documentElement.setAttribute('data-ready','1');
})();
